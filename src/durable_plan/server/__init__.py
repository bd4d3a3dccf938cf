"""Running next to a Temporal server: the embedded dev server, connecting with one-line
errors, and the entry points' one-line activity logs."""
