"""Growing the set without losing work: judgments belong to pairs, and a new pool only adds.

Through the real URLs: annotators judge, the lead previews and builds a second pool (more runs,
a deeper cut, new queries), and every judgment, claim and history page survives it; only pairs
nobody has graded become work, and the double-judged share holds per stratum across pools.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Project, Role
from annotation.services import membership_set, project_create
from formats.trec import RunRow
from judging.models import Claim, ClaimState, JudgingPolicy, Judgment, WorkItem, WorkUnit
from judging.services import pool_open
from pooling.models import Pair, Pool, PoolScope, Run
from pooling.services import current_pool, run_create
from tests.conftest import World
from tests.judging_helpers import answer, judge_page, shown_item

pytestmark = pytest.mark.django_db


def preview(client: Client, slug: str, **form: object) -> str:
    response = client.post(reverse("pool_preview", args=[slug]), form)
    assert response.status_code == 200, response.content.decode()[:300]
    return response.content.decode()


def figure(page: str, name: str) -> int:
    match = re.search(rf'id="preview-{name}">(?:<strong>)?(\d+)', page)
    assert match, f"no {name} in the preview"
    return int(match.group(1))


def confirm(client: Client, slug: str, page: str) -> None:
    """Press "Build this pool" on a preview page: its hidden fields, posted (eager job)."""
    form = page[page.index('action="' + reverse("pool_create", args=[slug])) :]
    fields: dict[str, list[str]] = {}
    for name, value in re.findall(r'type="hidden" name="(\w+)" value="([^"]*)"', form):
        fields.setdefault(name, []).append(value)
    response = client.post(reverse("pool_create", args=[slug]), fields)
    assert response.status_code == 302


def judge_query(client: Client, slug: str, grade: int = 2) -> list[int]:
    """Answer every item of the query on screen; returns the pairs graded."""
    page = judge_page(client, slug)
    first = shown_item(page)
    assert first is not None
    graded = []
    while (item := shown_item(page)) is not None and item.query == first.query:
        graded.append(item.pk)
        page = answer(client, slug, page, grade)
    return graded


def judge_everything(client: Client, slug: str) -> list[int]:
    """Answer whatever the person is offered until nothing is left; returns the pairs."""
    page = judge_page(client, slug)
    graded = []
    while (item := shown_item(page)) is not None:
        graded.append(item.pk)
        page = answer(client, slug, page, 1)
    return graded


def deeper_run(project: Project) -> Run:
    """A third system finding, for every query, documents the first pool never held."""
    ranked = {
        q: [RunRow(q, f"d{i}", r, 10.0 - r, "c") for r, i in enumerate((5, 4, 2, 1), start=1)]
        for q in ("q1", "q2")
    }
    return run_create(project=project, name="c", ranked=ranked)


def test_a_new_pool_keeps_every_judgment_and_offers_only_pairs_nobody_graded(
    world: World,
) -> None:
    slug = world.project.slug
    alice, lead = world.client_for(world.alice), world.client_for(world.lead)
    graded = judge_query(alice, slug)
    before = list(Judgment.objects.order_by("pk").values())
    old_pool = current_pool(world.project)
    assert old_pool is not None
    runs = [*world.project.runs.values_list("pk", flat=True), deeper_run(world.project).pk]

    page = preview(lead, slug, runs=runs, depth=4, scope="all")
    selected = Pair.objects.filter(query__project=world.project).count()
    assert figure(page, "judged") == len(graded)
    assert figure(page, "added") == 10 - selected  # 2 queries x 5 documents, all pooled now
    assert Pool.objects.count() == 1  # a preview builds nothing
    confirm(lead, slug, page)

    pool = current_pool(world.project)
    assert pool is not None and pool != old_pool
    assert (pool.selected, pool.judged_before, pool.added) == (10, len(graded), 10 - selected)
    assert list(Judgment.objects.order_by("pk").values()) == before  # nothing lost or changed
    work = set(WorkItem.objects.filter(unit__pool=pool).values_list("pair_id", flat=True))
    assert work and not work & set(graded)  # graded pairs are never work again
    assert pool.to_judge == len(work) == 10 - len(graded)
    # the annotators judge the rest, and nobody is shown a pair alice graded
    bob = world.client_for(world.bob)
    shown = judge_everything(alice, slug) + judge_everything(bob, slug)
    assert not set(shown) & set(graded) and set(shown) == work
    # the old pool's history stays readable, and the pair's page lists both pools
    assert lead.get(reverse("pool_view", args=[slug, old_pool.pk])).status_code == 200
    history = lead.get(reverse("judging_item", args=[slug, graded[0]])).content.decode()
    assert history.count("alice") >= 1 and f"#{old_pool.pk}" in history and f"#{pool.pk}" in history
    # qrels hold the old grades and the new ones
    qrels = lead.get(reverse("qrels_download", args=[slug])).content.decode().splitlines()
    assert len(qrels) == 10


def test_work_left_in_the_previous_pool_comes_along_with_new_queries(world: World) -> None:
    slug = world.project.slug
    alice, lead = world.client_for(world.alice), world.client_for(world.lead)
    graded = judge_query(alice, slug)
    old = current_pool(world.project)
    assert old is not None
    left = set(WorkItem.objects.filter(unit__pool=old).values_list("pair_id", flat=True))
    left -= set(graded)
    world.project.queries.create(qid="q3", text="third question", stratum="")
    new_run = run_create(
        project=world.project,
        name="new",
        ranked={"q3": [RunRow("q3", f"d{i}", i, 5.0 - i, "new") for i in (1, 2)]},
    )
    page = preview(lead, slug, runs=[new_run.pk], depth=10, scope="new")
    assert (figure(page, "selected"), figure(page, "added")) == (2, 2)
    assert figure(page, "carried") == len(left)
    confirm(lead, slug, page)
    pool = current_pool(world.project)
    assert pool is not None and pool.scope == PoolScope.NEW
    work = set(WorkItem.objects.filter(unit__pool=pool).values_list("pair_id", flat=True))
    q3 = set(Pair.objects.filter(query__qid="q3").values_list("pk", flat=True))
    assert work == left | q3
    # a pool of "new queries" when none is left says so
    response = lead.post(
        reverse("pool_preview", args=[slug]), {"runs": [new_run.pk], "depth": 10, "scope": "new"}
    )
    assert response.status_code == 302
    message = lead.get(reverse("pool_detail", args=[slug])).content.decode()
    assert "no new query to pool" in message


def test_a_query_being_judged_stays_with_its_annotator_across_a_new_pool(world: World) -> None:
    slug = world.project.slug
    alice, lead = world.client_for(world.alice), world.client_for(world.lead)
    page = judge_page(alice, slug)
    first = shown_item(page)
    assert first is not None
    page = answer(alice, slug, page, 1)  # one item of the query answered, the rest not
    old_claim = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    runs = [*world.project.runs.values_list("pk", flat=True), deeper_run(world.project).pk]
    confirm(lead, slug, preview(lead, slug, runs=runs, depth=4, scope="all"))

    old_claim.refresh_from_db()
    assert old_claim.state == ClaimState.MOVED
    claim = Claim.objects.get(user=world.alice, state=ClaimState.ACTIVE)
    assert claim.pool == current_pool(world.project) and claim.unit.query == first.query
    # the answer given on the stale page's next item still lands (items are pairs)
    nxt = shown_item(page)
    assert nxt is not None and nxt.query == first.query
    page = answer(alice, slug, page, 2)
    seen = {first.pk, nxt.pk}
    while (item := shown_item(page)) is not None and item.query == first.query:
        assert item.pk not in seen  # never offered again what alice answered
        seen.add(item.pk)
        page = answer(alice, slug, page, 0)
    assert Pair.objects.filter(query=first.query).count() == len(seen)
    assert Claim.objects.get(pk=claim.pk).state == ClaimState.DONE


def strata_project() -> Project:
    project = project_create(slug="strata", name="Strata")
    project.documents.create(docid="d0", title="T", text="text")
    return project


def add_queries(project: Project, start: int, count: int) -> Run:
    strata = ("head", "torso", "tail")
    qids = [f"q{n:03d}" for n in range(start, start + count)]
    for n, qid in enumerate(qids, start=start):
        project.queries.create(qid=qid, text=f"query {qid}", stratum=strata[n % 3])
    ranked = {qid: [RunRow(qid, "d0", 1, 1.0, "r")] for qid in qids}
    return run_create(project=project, name=f"r{start}", ranked=ranked)


def doubles_per_stratum(project: Project) -> dict[str, int]:
    units = WorkUnit.objects.filter(pool__project=project, judges_needed=2)
    queries = set(units.values_list("query_id", "stratum"))
    counts: dict[str, int] = {}
    for _, stratum in queries:
        counts[stratum] = counts.get(stratum, 0) + 1
    return counts


def test_the_double_judged_share_holds_per_stratum_across_pools() -> None:
    project = strata_project()
    JudgingPolicy.objects.create(project=project, double_share=0.2)
    first = add_queries(project, 0, 30)  # 10 per stratum: 2 doubles each
    pool = pool_open(project=project, runs=[first], depth=1, seed=3)
    assert doubles_per_stratum(project) == {"head": 2, "torso": 2, "tail": 2}
    before = set(WorkUnit.objects.filter(pool=pool, judges_needed=2).values_list("query_id"))
    second = add_queries(project, 30, 30)  # 20 per stratum now: 4 doubles each
    again = pool_open(project=project, runs=[second], depth=1, seed=4, scope=PoolScope.NEW)
    assert doubles_per_stratum(project) == {"head": 4, "torso": 4, "tail": 4}
    # the first pool's doubles (nobody judged them yet) came along, still double
    carried = WorkUnit.objects.filter(pool=again, query_id__in=[q for (q,) in before])
    assert set(carried.values_list("judges_needed", flat=True)) == {2}


def test_a_build_confirmed_on_a_stale_preview_is_refused_and_builds_nothing(
    world: World,
) -> None:
    slug = world.project.slug
    other = Client()
    other_lead = world.lead.__class__.objects.create_user("lotte", password="x" * 12)
    membership_set(project=world.project, user=other_lead, role=Role.LEAD)
    other.force_login(other_lead)
    lead = world.client_for(world.lead)
    runs = [*world.project.runs.values_list("pk", flat=True), deeper_run(world.project).pk]
    mine = preview(lead, slug, runs=runs, depth=4, scope="all")
    theirs = preview(other, slug, runs=runs, depth=2, scope="all")
    confirm(other, slug, theirs)  # the other lead confirms first and wins
    pools = Pool.objects.count()
    confirm(lead, slug, mine)
    assert Pool.objects.count() == pools  # nothing half built
    page = lead.get(reverse("pool_detail", args=[slug])).content.decode()
    assert "could not be built" in page and "lotte built pool" in page
    assert "look at the new preview" in page


def test_the_preview_names_documents_missing_from_the_corpus(world: World) -> None:
    slug = world.project.slug
    lead = world.client_for(world.lead)
    ghost = run_create(
        project=world.project,
        name="ghost",
        ranked={"q1": [RunRow("q1", "nowhere", 1, 1.0, "ghost"), RunRow("q1", "d1", 2, 0.5, "g")]},
    )
    response = lead.post(reverse("pool_preview", args=[slug]), {"runs": [ghost.pk], "depth": 5})
    assert response.status_code == 302  # refused: the lead chooses
    page = lead.get(reverse("pool_detail", args=[slug])).content.decode()
    assert "1 pooled documents are not in the corpus" in page and "nowhere" in page
    page = preview(lead, slug, runs=[ghost.pk], depth=5, scope="all", skip_missing="on")
    assert 'id="preview-missing"' in page and "nowhere" in page


def test_the_command_previews_then_builds_a_pool_of_new_queries(world: World) -> None:
    import io

    from django.core.management import call_command

    world.project.queries.create(qid="q3", text="third question")
    run_create(
        project=world.project,
        name="q3-only",
        ranked={"q3": [RunRow("q3", "d2", 1, 1.0, "x"), RunRow("q3", "d4", 2, 0.5, "x")]},
    )
    out = io.StringIO()
    pools = Pool.objects.count()
    args = ("build_pool", "acme", "--run", "q3-only", "--queries", "new", "--depth", "5")
    call_command(*args, "--preview", stdout=out)
    assert Pool.objects.count() == pools
    assert "2 pairs selected, 2 new, 0 already judged" in out.getvalue()
    call_command(*args, stdout=out)
    pool = current_pool(world.project)
    assert pool is not None and (pool.selected, pool.added, pool.scope) == (2, 2, "new")
    assert f"pool #{pool.pk} built" in out.getvalue()
