"""Report: the demo's results and a user's own outputs as Markdown and HTML with plots, and the
Markdown pieces they share.

Imports: any room below it (``characterise``, ``model``, ``policy``, ``studies``, ``roofline``, ``sim``).
"""
