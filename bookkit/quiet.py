"""Keep machine-dependent import-time messages of optional libraries out of the notebooks.

`transformers` imports DeepSpeed and bitsandbytes whenever they are installed (the book
installs both for "Hugging Face models and adapters" and "Beyond one device"), and both log
a warning while being imported that depends on the machine rather than on the code:

* DeepSpeed, on a machine where it detects no accelerator: "Setting accelerator to CPU.
  If you have GPU or other accelerator, we were unable to detect it." (with a timestamp);
* bitsandbytes, on CPUs with AVX512-BF16 only: "Failed to load CPU gemm_4bit_forward
  from kernels-community ..." (an optional kernel package).

A stored notebook output must be what the code prints on every machine, so
`quiet_import_logs` (run when `bookkit` is imported, before any notebook imports
`transformers`) drops exactly those two messages and changes nothing else: a filter on
DeepSpeed's logger removes its CPU notice (DeepSpeed still detects the accelerator
itself, so a machine with an AMD, Intel or Apple GPU keeps it), and the ``bitsandbytes``
loggers' threshold goes up to ERROR unless the user configured them.
"""
from __future__ import annotations

import logging

__all__ = ["quiet_import_logs", "DEEPSPEED_CPU_NOTICE"]

DEEPSPEED_CPU_NOTICE = "Setting accelerator to CPU."


def _not_the_cpu_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(DEEPSPEED_CPU_NOTICE)


def quiet_import_logs() -> None:
    """Silence the two import-time warnings described in this module's docstring."""
    # DeepSpeed configures its logger ("DeepSpeed") when imported; a filter added before
    # that stays on the same logger object.
    deepspeed = logging.getLogger("DeepSpeed")
    if _not_the_cpu_notice not in deepspeed.filters:
        deepspeed.addFilter(_not_the_cpu_notice)
    bnb = logging.getLogger("bitsandbytes")
    if bnb.level == logging.NOTSET:  # not configured by the user
        bnb.setLevel(logging.ERROR)
