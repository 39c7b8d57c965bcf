import sys

from kegen.cli import main

sys.exit(main())
