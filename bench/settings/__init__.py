"""One minimal Django settings module per Django-based system; base.py is what they share."""
