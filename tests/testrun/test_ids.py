"""The id forms SWE-bench suites list, matched to a pytest log's node ids."""

from swedojo.schema import TestStatus
from swedojo.testrun.ids import status_of

LOG = {
    "sympy/core/tests/test_numbers.py::test_Float": TestStatus.PASSED,
    "sympy/printing/tests/test_numpy.py::test_NumPyPrinter": TestStatus.SKIPPED,
    "sympy/printing/tests/test_pycode.py::test_NumPyPrinter": TestStatus.FAILED,
    "tests/forms_tests/tests/test_forms.py::FormsTestCase::test_has_error": TestStatus.PASSED,
    "tests/other/test_forms.py::FormsTestCase::test_has_error": TestStatus.FAILED,
    "testing/test_mark.py::test_marked[a b-1]": TestStatus.PASSED,
    "testing/test_mark.py::test_marked[c d-2]": TestStatus.PASSED,
    "testing/test_mark.py::test_p[1]": TestStatus.PASSED,
}


def test_node_ids_match_themselves_and_only_themselves():
    assert status_of(LOG, "sympy/core/tests/test_numbers.py::test_Float") == TestStatus.PASSED
    assert status_of(LOG, "sympy/core/tests/test_numbers.py::test_Flo") is None


def test_a_bare_function_name_takes_the_worst_of_its_files():
    assert status_of(LOG, "test_Float") == TestStatus.PASSED
    assert status_of(LOG, "test_NumPyPrinter") == TestStatus.FAILED
    assert status_of(LOG, "test_p") == TestStatus.PASSED  # its parametrized cases
    assert status_of(LOG, "test_nothing") is None


def test_django_form_names_module_and_class():
    assert status_of(LOG, "test_has_error (forms_tests.tests.test_forms.FormsTestCase)") == TestStatus.PASSED
    assert status_of(LOG, "test_has_error (other.test_forms.FormsTestCase)") == TestStatus.FAILED
    assert status_of(LOG, "test_has_error (forms_tests.test_forms.FormsTestCase)") is None


def test_a_parametrized_id_cut_at_a_space_matches_its_case():
    assert status_of(LOG, "testing/test_mark.py::test_marked[a") == TestStatus.PASSED
    assert status_of(LOG, "testing/test_mark.py::test_marked[x") is None
