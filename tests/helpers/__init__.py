"""Importable helpers the tests share (fixtures live in the conftest.py files): real server
processes, models derived from the real ones, LoRA adapters, a stand-in for the hub."""
