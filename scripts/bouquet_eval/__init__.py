"""bouquet-eval: reproduce BOUQuET machine-translation benchmark numbers for any model.

The Snakemake workflow in `workflow/` runs these modules; each step can also be run by hand.
"""

from bouquet_eval.translation.runner import run_translation
from bouquet_eval.translators import RowTranslator, Translator
from bouquet_eval.translators.prompt import PromptFn, build_prompt

__all__ = ["PromptFn", "RowTranslator", "Translator", "build_prompt", "run_translation"]
