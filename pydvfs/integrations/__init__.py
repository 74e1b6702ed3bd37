"""The governor inside training frameworks: :mod:`.hf` (a ``transformers.TrainerCallback``)
and :mod:`.lightning` (a ``lightning.pytorch.Callback``). Both drive
:class:`pydvfs.OnlineGovernor`, the engine ``pydvfs run`` uses, from the framework's
step hook. Importing this package imports neither framework.

Imports: the root modules, ``device``, ``measure``, ``characterise``, ``model``, ``policy``, ``governor``.
"""
