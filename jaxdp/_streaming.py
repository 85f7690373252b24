"""PLACEHOLDER (issue 3 replaces this module): the streaming exponential mechanism."""


def exponential_streaming(*args, **kwargs):
    raise NotImplementedError("exponential_streaming: being built in issue 3")
