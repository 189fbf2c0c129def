"""One module per console pane; each pane is a widget taking a ConsoleContext."""
