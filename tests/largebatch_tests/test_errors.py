"""errors: the messages and attributes the job's one-line errors use."""
import numpy
import pytest

from largebatch import errors


class Param(object):
    def __init__(self, size):
        self.grad = numpy.zeros(size)


def test_non_finite_error_names_first_parameter():
    named = [('/a', Param(3)), ('/b/W', Param(2)), ('/c', Param(4))]
    error = errors.NonFiniteGradientError.at(7, 4, named)
    # ChainerMN's convention: a ValueError whose message says "diverged"
    assert isinstance(error, ValueError)
    assert not isinstance(error, errors.InputError)
    assert (error.count, error.param_name) == (7, '/b/W')
    assert str(error) == ('all-reduced gradient diverged: 7 non-finite '
                          'element(s), the first in /b/W')
    assert errors.NonFiniteGradientError.at(1, 0, named).param_name == '/a'
    assert errors.NonFiniteGradientError.at(1, 8, named).param_name == '/c'


def test_non_finite_error_beyond_the_buffer():
    with pytest.raises(IndexError, match='element 9'):
        errors.NonFiniteGradientError.at(1, 9, [('/a', Param(9))])


def test_parameter_error_keeps_what_the_script_names():
    error = errors.ParameterError('momentum', 1.5, 'in [0, 1)')
    assert isinstance(error, ValueError)
    assert not isinstance(error, errors.InputError)
    assert (error.name, error.value, error.expected) == (
        'momentum', 1.5, 'in [0, 1)')
    assert str(error) == 'momentum must be in [0, 1), got 1.5'
