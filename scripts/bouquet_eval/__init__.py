"""bouquet-eval: reproduce BOUQuET machine-translation benchmark numbers for any model.

The Snakemake workflow in `workflow/` runs these modules; each step can also be run by hand.
"""

from bouquet_eval.prompt import PromptFn, build_prompt
from bouquet_eval.runner import run_translation
from bouquet_eval.translators import RowTranslator, Translator

__all__ = ["PromptFn", "RowTranslator", "Translator", "build_prompt", "run_translation"]
