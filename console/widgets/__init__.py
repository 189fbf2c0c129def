"""Small reusable widgets for the console panes."""
