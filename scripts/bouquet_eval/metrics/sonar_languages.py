"""The languages SONAR's text encoder encodes, and the SONAR code of a BOUQuET language.

SONAR's text encoder (`text_sonar_basic_encoder`, the encoder of BLASER 2.0) was trained on
NLLB-200's languages and marks each sentence with one of their codes (`__fra_Latn__`); its
tokenizer refuses any other. A BOUQuET code maps to the SONAR code that names the same language
in the same script:

- its own code without the glottocode (`por_Latn_braz1246` -> `por_Latn`) where SONAR has it;
- else the code SONAR gives the same language and script under another name (`RENAMED`);
- else none: BLASER cannot score a direction with that language, and the workflow refuses it
  before any job starts, unless the metric's `languages` setting maps it to a SONAR code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from bouquet_eval.core.languages import LanguageCode
from bouquet_eval.metrics.training_languages import TrainingLanguages

_LISTED = """
    ace_Arab ace_Latn acm_Arab acq_Arab aeb_Arab afr_Latn ajp_Arab aka_Latn als_Latn amh_Ethi
    apc_Arab arb_Arab ars_Arab ary_Arab arz_Arab asm_Beng ast_Latn awa_Deva ayr_Latn azb_Arab
    azj_Latn bak_Cyrl bam_Latn ban_Latn bel_Cyrl bem_Latn ben_Beng bho_Deva bjn_Arab bjn_Latn
    bod_Tibt bos_Latn bug_Latn bul_Cyrl cat_Latn ceb_Latn ces_Latn cjk_Latn ckb_Arab crh_Latn
    cym_Latn dan_Latn deu_Latn dik_Latn dyu_Latn dzo_Tibt ell_Grek eng_Latn epo_Latn est_Latn
    eus_Latn ewe_Latn fao_Latn fij_Latn fin_Latn fon_Latn fra_Latn fur_Latn fuv_Latn gaz_Latn
    gla_Latn gle_Latn glg_Latn grn_Latn guj_Gujr hat_Latn hau_Latn heb_Hebr hin_Deva hne_Deva
    hrv_Latn hun_Latn hye_Armn ibo_Latn ilo_Latn ind_Latn isl_Latn ita_Latn jav_Latn jpn_Jpan
    kab_Latn kac_Latn kam_Latn kan_Knda kas_Arab kas_Deva kat_Geor kaz_Cyrl kbp_Latn kea_Latn
    khk_Cyrl khm_Khmr kik_Latn kin_Latn kir_Cyrl kmb_Latn kmr_Latn knc_Arab knc_Latn kon_Latn
    kor_Hang lao_Laoo lij_Latn lim_Latn lin_Latn lit_Latn lmo_Latn ltg_Latn ltz_Latn lua_Latn
    lug_Latn luo_Latn lus_Latn lvs_Latn mag_Deva mai_Deva mal_Mlym mar_Deva min_Latn mkd_Cyrl
    mlt_Latn mni_Beng mos_Latn mri_Latn mya_Mymr nld_Latn nno_Latn nob_Latn npi_Deva nso_Latn
    nus_Latn nya_Latn oci_Latn ory_Orya pag_Latn pan_Guru pap_Latn pbt_Arab pes_Arab plt_Latn
    pol_Latn por_Latn prs_Arab quy_Latn ron_Latn run_Latn rus_Cyrl sag_Latn san_Deva sat_Beng
    scn_Latn shn_Mymr sin_Sinh slk_Latn slv_Latn smo_Latn sna_Latn snd_Arab som_Latn sot_Latn
    spa_Latn srd_Latn srp_Cyrl ssw_Latn sun_Latn swe_Latn swh_Latn szl_Latn tam_Taml taq_Latn
    taq_Tfng tat_Cyrl tel_Telu tgk_Cyrl tgl_Latn tha_Thai tir_Ethi tpi_Latn tsn_Latn tso_Latn
    tuk_Latn tum_Latn tur_Latn twi_Latn tzm_Tfng uig_Arab ukr_Cyrl umb_Latn urd_Arab uzn_Latn
    vec_Latn vie_Latn war_Latn wol_Latn xho_Latn ydd_Hebr yor_Latn yue_Hant zho_Hans zho_Hant
    zsm_Latn zul_Latn
"""
SONAR_CODES: frozenset[str] = frozenset(_LISTED.split())
"""The 202 language codes of sonar-space 0.5.0's `text_sonar_basic_encoder` card (its
tokenizer's `langs`): NLLB-200's."""

RENAMED: Mapping[str, str] = MappingProxyType(
    {
        # Mandarin: NLLB-200 names it by its macrolanguage, Chinese.
        "cmn_Hans": "zho_Hans",
        "cmn_Hant": "zho_Hant",
        # Korean: BOUQuET writes its script as Hangul with Han (Kore), NLLB-200 as Hangul.
        "kor_Kore": "kor_Hang",
        # Standard Estonian: NLLB-200 names it by its macrolanguage, Estonian.
        "ekk_Latn": "est_Latn",
        # Santali: NLLB-200's data is in Ol Chiki, under a code that says Bengali script
        # (FLORES-200 later renamed it sat_Olck).
        "sat_Olck": "sat_Beng",
    }
)
"""BOUQuET codes (without glottocode) whose language and script SONAR encodes under another
code."""

SONAR_LANGUAGES = TrainingLanguages.of_iso639_3(
    "SONAR's text encoder (Duquenne et al., 2023), the encoder of BLASER 2.0: the 202 "
    "language codes of NLLB-200 (NLLB Team, 2022), of which 195 distinct languages",
    {code.split("_")[0] for code in SONAR_CODES},
)
"""SONAR's languages, compared at the level of the language as the other lists are."""


def sonar_code(code: str, languages: Mapping[str, str] | None = None) -> str | None:
    """The SONAR code a BOUQuET code's sentences are encoded with, or None when SONAR has
    none. `languages`: the metric's own mapping (BOUQuET code, with its glottocode or without,
    -> SONAR code), which comes first."""
    languages = languages or {}
    parsed = LanguageCode.parse(code)
    for key in (code, parsed.base):
        if key in languages:
            return languages[key]
    if parsed.base in SONAR_CODES:
        return parsed.base
    return RENAMED.get(parsed.base)


def refusal(code: str, languages: Mapping[str, str]) -> str | None:
    """Why BLASER cannot score sentences of a BOUQuET language (None when it can)."""
    mapped = sonar_code(code, languages)
    if mapped is None:
        return f"SONAR has no code for {code}"
    if mapped not in SONAR_CODES:
        return f"{code} is mapped to {mapped}, which is not a SONAR code"
    return None
