"""Passes over the tile IR for the mtia target. Each pass is a small class with a `name`, its
options as fields, `apply(function)`, and (for performance options) `search_space()`."""
