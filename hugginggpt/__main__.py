import sys

from hugginggpt.commands.cli import main

sys.exit(main())
