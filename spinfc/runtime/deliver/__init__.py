"""Delivery: a pass's read logprobs become each option's logprob, p, floor_p and residual (`results`), and a pack's
answers its categories and decision (`pack_scores`)."""
