"""The forms of the comparison page and the must-never-break list."""

from __future__ import annotations

from typing import Any

from django import forms


class CompareForm(forms.Form):
    """Two runs scored under the release, the measure, and the sample size's inputs."""

    baseline = forms.ChoiceField()
    candidate = forms.ChoiceField()
    metric = forms.ChoiceField()
    effect = forms.FloatField(
        required=False,
        min_value=1e-6,
        max_value=1.0,
        help_text="the difference to detect; empty: the observed one (or 0.02 when none)",
    )
    power = forms.FloatField(initial=0.8, required=False, min_value=0.5, max_value=0.999)
    alpha = forms.FloatField(initial=0.05, required=False, min_value=0.0001, max_value=0.5)

    def __init__(self, data: Any, *, runs: list[str], measures: list[str]) -> None:
        super().__init__(data)
        run_choices = [("", "—"), *((name, name) for name in runs)]
        for name, choices in (
            ("baseline", run_choices),
            ("candidate", run_choices),
            ("metric", [(m, m) for m in measures]),
        ):
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = choices

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("baseline") and data.get("baseline") == data.get("candidate"):
            raise forms.ValidationError("Choose two different runs.")
        return data


class MustNeverBreakForm(forms.Form):
    qid = forms.CharField(max_length=200, label="Query id")
    docid = forms.CharField(max_length=200, label="Document id")
    note = forms.CharField(max_length=500, required=False)


class MustNeverBreakImportForm(forms.Form):
    file = forms.FileField(help_text="`qid docid` lines, `# note` after a case, as `compare` reads")
