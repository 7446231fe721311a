"""A plugin module that calls ``sys.exit()`` on import (discovery must survive it)."""
import sys

sys.exit("this test plugin ends the process on import, on purpose")
