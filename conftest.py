"""Loads the plugin that turns each Python driver ctest runs into pytest items (zdptest/ctest.py)."""
pytest_plugins = ["zdptest.ctest"]
