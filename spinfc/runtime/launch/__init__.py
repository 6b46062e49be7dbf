"""Launching: a piece of work run on the model. A pass through the fixed shapes (`runner`), its contents read before
from the content cache (`content_cache`, `cached_rows`), a completions prompt pass (`prompt_logprobs`), a
generation's step (`generate`)."""
