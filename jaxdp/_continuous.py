"""PLACEHOLDER (issue 3 replaces this module): exact sampling over continuous ranges."""


def exponential_piecewise(*args, **kwargs):
    raise NotImplementedError("exponential_piecewise: being built in issue 3")


def private_price(*args, **kwargs):
    raise NotImplementedError("private_price: being built in issue 3")


def private_quantile(*args, **kwargs):
    raise NotImplementedError("private_quantile: being built in issue 3")
