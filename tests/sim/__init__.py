"""Tests of the simulator (a package: modules import each other by full name)."""
