"""The IR (`nodes`), its text form (`print_ir`) and its verifier (`verify`)."""

from spinfc.ir.nodes import *  # noqa: F401,F403
from spinfc.ir.printer import print_ir  # noqa: F401
from spinfc.ir.verifier import IRVerifyError, verify  # noqa: F401
