"""hybridmem workbench: ``streamlit run app.py`` (or ``make app``).

The entry script: page config, the shared sidebar (data source and ranking config), and ``st.navigation`` over the
page modules in ``hybridmem/workbench/``. Pages hold UI only; see :mod:`hybridmem.workbench`.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships with the project; never reach for the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import streamlit as st  # noqa: E402

from hybridmem.workbench import sidebar  # noqa: E402

st.set_page_config(page_title="hybridmem workbench", page_icon=":material/manage_search:", layout="wide")

SEARCH = "hybridmem/workbench/search.py"
RRF_SIDE = ("Search inspector", "Fusion compare")  # pages that show RRF beside the sidebar's fusion: RRF k matters
PAGES = [
    # Streamlit serves the default page at "/" whatever its url_path; a hidden twin keeps "/search" (the URL people
    # copy from the menu and share) from showing "Page not found"
    st.Page(SEARCH, title="Search inspector", icon=":material/search:", url_path="home", default=True),
    st.Page(SEARCH, title="Search inspector", icon=":material/search:", url_path="search", visibility="hidden"),
    st.Page("hybridmem/workbench/queries.py", title="Agent queries", icon=":material/history:", url_path="queries"),
    st.Page("hybridmem/workbench/fusion.py", title="Fusion compare", icon=":material/compare_arrows:",
            url_path="fusion"),
    st.Page("hybridmem/workbench/sweeps.py", title="Sweeps", icon=":material/tune:", url_path="sweeps"),
    st.Page("hybridmem/workbench/evaluation.py", title="Evaluation", icon=":material/analytics:",
            url_path="evaluation"),
    st.Page("hybridmem/workbench/index_page.py", title="Index", icon=":material/database:", url_path="index"),
]

page = st.navigation(PAGES)
sidebar.render(rrf_side=page.title in RRF_SIDE)
page.run()
