"""Models of this app arrive with later capabilities."""
