"""spinfc: a compiler and server for bulk scoring with language models."""

__version__ = "0.1.0"
