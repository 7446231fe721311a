"""A plugin module that fails to import (discovery must report it, not crash)."""
raise ImportError("this test plugin is broken on purpose")
