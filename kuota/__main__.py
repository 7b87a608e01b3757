import sys

from kuota.cli import main

sys.exit(main())
