"""The top layer: the runner (papermill over models x chapters), the book and the comparison page."""
