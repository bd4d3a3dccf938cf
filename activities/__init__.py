"""Example tools for the demo: a tabletop game master."""
