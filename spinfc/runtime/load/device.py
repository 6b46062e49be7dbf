"""A device named on a command line (`spinfc quantize --device`), checked before any work: a torch device this
machine can hold tensors on. The check asks the device itself (one small allocation), whatever its kind, so a GPU
that is absent, out of range or not built into this torch is refused in one line, not by a traceback later."""

from __future__ import annotations

import torch


class DeviceError(ValueError):
    """A device that cannot be used here; the message names it, says why and what this machine has."""


def usable_device(text: str, flag: str = "--device") -> str:
    """`text` as a torch device string this machine can allocate on; raises DeviceError naming `flag` otherwise."""
    try:
        device = torch.device(text)
    except RuntimeError:
        raise DeviceError(f"{flag} {text!r} is not a torch device: give cpu, or cuda:N for the Nth GPU "
                          f"({available()})") from None
    if device.type == "meta":
        raise DeviceError(f"{flag} meta holds no values, so nothing can be computed on it: give cpu or cuda:N "
                          f"({available()})")
    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, NotImplementedError) as error:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        raise DeviceError(f"{flag} {text}: this machine cannot hold tensors there ({lines[0].rstrip('.')}); give "
                          f"one it has ({available()})") from None
    return str(device)


def available() -> str:
    """The devices this machine has, in words: `cpu`, and the accelerator's `cuda:0` ... where there is one."""
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    if accelerator is None:
        return "this machine has cpu only"
    count = torch.accelerator.device_count()
    names = ", ".join(f"{accelerator.type}:{i}" for i in range(count))
    return f"this machine has cpu and {names}"
