"""Keep machine-dependent import-time messages of optional libraries out of the notebooks.

`transformers` imports DeepSpeed and bitsandbytes whenever they are installed (the book
installs both for chapters 13 and 14), and both log a warning while being imported that
depends on the machine rather than on the code:

* DeepSpeed, on a machine without a GPU: "Setting accelerator to CPU. If you have GPU or
  other accelerator, we were unable to detect it." (with a timestamp);
* bitsandbytes, on CPUs with AVX512-BF16 only: "Failed to load CPU gemm_4bit_forward
  from kernels-community ..." (an optional kernel package).

A stored notebook output must be what the code prints on every machine, so
`quiet_import_logs` (run when `bookkit` is imported, before any notebook imports
`transformers`) removes both: it tells DeepSpeed the CPU accelerator it would fall back
to anyway (``DS_ACCELERATOR=cpu``, only where no NVIDIA device is present and the
variable is unset), and raises the ``bitsandbytes`` loggers' threshold to ERROR.
"""
from __future__ import annotations

import logging
import os

__all__ = ["quiet_import_logs"]


def _has_nvidia_device() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def quiet_import_logs() -> None:
    """Silence the two import-time warnings described in this module's docstring."""
    if "DS_ACCELERATOR" not in os.environ and not _has_nvidia_device():
        os.environ["DS_ACCELERATOR"] = "cpu"  # what DeepSpeed picks itself, minus the warning
    bnb = logging.getLogger("bitsandbytes")
    if bnb.level == logging.NOTSET:  # not configured by the user
        bnb.setLevel(logging.ERROR)
