"""The forms of the LLM judge's pages. Each error says what to enter instead; the services
check the same bounds again (the commands and the API reach them without these forms)."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from judging.models import JudgeSettings

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_NAMES = {"settings"}  # /judges/settings/ is the settings page, not a judge


def _required(what: str) -> dict[str, str]:
    said = f"Enter {what}."
    return {"required": said, "invalid": said, "min_value": said, "max_value": said}


class JudgeForm(forms.Form):
    """A judge's configuration. There is no key field: the key stays in the environment of
    the workers, and the form asks only for the variable's name."""

    name = forms.SlugField(
        max_length=64,
        error_messages=_required("a name of letters, digits, hyphens and underscores"),
    )
    base_url = forms.URLField(
        max_length=500,
        error_messages=_required(
            "the endpoint's base URL, such as https://api.openai.com/v1 or http://localhost:8000/v1"
        ),
    )
    model = forms.CharField(max_length=200, error_messages=_required("the model's name"))
    api_key_env = forms.CharField(max_length=100, required=False)
    concurrency = forms.IntegerField(
        min_value=1,
        max_value=256,
        initial=8,
        error_messages=_required("how many calls may run at once, from 1 to 256"),
    )
    timeout = forms.FloatField(
        min_value=0.1,
        max_value=3600,
        initial=60.0,
        error_messages=_required("the seconds a call may take, such as 60"),
    )
    max_retries = forms.IntegerField(
        min_value=0,
        max_value=10,
        initial=4,
        error_messages=_required("how many times a call is retried, from 0 to 10"),
    )
    price_input = forms.FloatField(min_value=0, max_value=1e6, required=False)
    price_output = forms.FloatField(min_value=0, max_value=1e6, required=False)
    reasoning = forms.BooleanField(required=False)
    prompt_template = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 8}))

    def __init__(self, *args: Any, adding: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not adding:
            del self.fields["name"]

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if name in RESERVED_NAMES:
            raise forms.ValidationError(
                f"“{name}” is the settings page's address: choose another name."
            )
        return name

    def clean_api_key_env(self) -> str:
        value: str = self.cleaned_data["api_key_env"].strip()
        if value and not ENV_NAME.fullmatch(value):
            # Perhaps a key pasted by mistake: it is not written back into the page.
            self.data = {name: self.data.get(name) for name in self.data} | {"api_key_env": ""}
            raise forms.ValidationError(
                "Enter the NAME of the environment variable that holds the key (such as "
                "OPENAI_API_KEY), not the key itself: letters, digits and underscores."
            )
        return value


class JudgeSettingsForm(forms.ModelForm):
    """The gate's conditions and the shares, with the bounds people can get wrong."""

    class Meta:
        model = JudgeSettings
        fields = [
            "min_pairs", "ceiling_margin", "kappa_floor", "max_mean_diff", "ratio_low",
            "ratio_high", "min_recall", "max_parse_failures", "min_tau", "relevance_threshold",
            "retest_sample", "prefilter_threshold", "audit_share", "human_only_share",
        ]  # fmt: skip

    SHARES = ("max_parse_failures", "audit_share", "human_only_share")
    RATIOS = ("min_recall",)

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        for name in (*self.SHARES, *self.RATIOS):
            value = data.get(name)
            if value is not None and not 0 <= value <= 1:
                self.add_error(name, "Enter a share between 0 and 1, such as 0.1 for 10 %.")
        for name in ("kappa_floor", "ceiling_margin"):
            value = data.get(name)
            if value is not None and not -1 <= value <= 1:
                self.add_error(name, "Enter a kappa between -1 and 1.")
        tau = data.get("min_tau")
        if tau is not None and not -1 <= tau <= 1:
            self.add_error("min_tau", "Enter Kendall's tau between -1 and 1, such as 0.8.")
        for name in ("relevance_threshold", "prefilter_threshold"):
            value = data.get(name)
            if value is not None and not 1 <= value <= 3:
                self.add_error(name, "Enter a grade from 1 to 3.")
        low, high = data.get("ratio_low"), data.get("ratio_high")
        if low is not None and low <= 0:
            self.add_error("ratio_low", "Enter a positive ratio, such as 0.8.")
        if low is not None and high is not None and low > high:
            self.add_error("ratio_high", "The highest ratio must be at least the lowest.")
        diff = data.get("max_mean_diff")
        if diff is not None and not 0 <= diff <= 3:
            self.add_error("max_mean_diff", "Enter a grade difference from 0 to 3, such as 0.3.")
        if data.get("min_pairs") == 0:
            self.add_error("min_pairs", "Enter at least 1 pair (100 is the default).")
        return data
