"""What reading a model's files can refuse with, in a module of its own: the config reader and every family's
config and weight reader raise it, and none of them need import another to do so."""

from __future__ import annotations


class UnsupportedModel(Exception):
    """A checkpoint uses an architecture or feature the model stacks do not implement; the message says which."""
