"""Puts this folder on the import path, so every test folder can use `sessions`."""
