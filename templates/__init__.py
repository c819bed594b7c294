"""Jinja templates for generated fragment modules (package data)."""
