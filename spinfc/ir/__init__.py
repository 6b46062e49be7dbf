from spinfc.ir.nodes import *  # noqa: F401,F403
