"""What a claim queue must never show, checked in the database after a race.

- an item held by more claims than its overlap (done, or active with a live lease);
- a person with two active claims in one project;
- an item whose `claims_done` differs from its number of done claims.
"""

from django.db.models import Count, F, Q
from django.utils import timezone

from dataplatform.claims import ClaimState


def violations(claim_model, *, item_field: str, holder_field: str, project_id: int, overlap: int) -> dict[str, list]:
    item_model = claim_model._meta.get_field(item_field).related_model
    claims = claim_model.objects.filter(project_id=project_id)
    live = Q(state=ClaimState.DONE) | Q(state=ClaimState.ACTIVE, lease_expires_at__gt=timezone.now())
    over = claims.filter(live).values(item_field).annotate(n=Count("id")).filter(n__gt=overlap)
    doubled = (claims.filter(state=ClaimState.ACTIVE).values(holder_field).annotate(n=Count("id"))
               .filter(n__gt=1))
    claims_of_item = claim_model._meta.get_field(item_field).related_query_name()  # "claims", "review_claims"
    miscounted = (item_model.objects.filter(project_id=project_id)
                  .annotate(done=Count(claims_of_item, filter=Q(**{f"{claims_of_item}__state": ClaimState.DONE})))
                  .exclude(claims_done=F("done")))
    return {
        "items over their overlap": list(over),
        "people with two active claims": list(doubled),
        "items whose claims_done is off": list(miscounted.values("pk", "claims_done", "done")),
    }


def assert_none(claim_model, **arguments) -> None:
    found = {name: rows for name, rows in violations(claim_model, **arguments).items() if rows}
    assert found == {}, found
