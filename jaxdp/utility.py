"""PLACEHOLDER (issue 5 replaces this module): jaxdp.utility."""
