"""Modules named after other projects' APIs, for moving code to pyllama by its import line."""
