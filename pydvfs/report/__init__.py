"""Report: the demo's results and a user's own outputs as Markdown and HTML with plots.

Imports: the root modules, ``device``, ``measure``, ``characterise``, ``model``, ``roofline``, ``sim``, ``policy``, ``governor``, ``studies``.
"""
