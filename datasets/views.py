"""Console pages of the datasets app: catalog, dataset detail with the license modal, mounts, uploads.

Views are thin: they read through ``datasets.selectors`` and act through ``datasets.services``; one view
serves a page and its htmx partial. Every lookup is scoped to the organization in the URL (foreign = 404).
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from datasets import selectors, services
from datasets.errors import DatasetError, DatasetNotFound
from datasets.forms import AgreementForm, CatalogFilterForm, MountForm, UploadForm
from datasets.models import Dataset, DatasetVersion, LicenseVersion
from datasets.uploads import SizeLimitUploadHandler
from portal.lib.htmx import is_partial
from portal.lib.http import AuthedHttpRequest
from portal.scoping import request_organization

PAGE_SIZE = 20


def _truthy(value: Any) -> bool:
    return str(value).lower() in {"1", "true", "on", "yes"}


def filter_catalog(qs: QuerySet[Dataset], params: Any) -> QuerySet[Dataset]:
    """Apply the catalog's search and filters (``q``, ``domain``, ``language``, ``commercial_use``,
    ``derivative_models``, ``free``) to a queryset of datasets; terms are those of a dataset's versions'
    licenses. Shared by the console and the API."""
    q = (params.get("q") or "").strip()
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(description__icontains=q) | Q(slug__icontains=q))
    if params.get("domain"):
        qs = qs.filter(domain=params["domain"])
    version_terms: dict[str, Any] = {}
    if params.get("language"):
        version_terms["language"] = params["language"]
    if _truthy(params.get("commercial_use")):
        version_terms["license_version__commercial_use"] = True
    if _truthy(params.get("derivative_models")):
        version_terms["license_version__derivative_models"] = True
    if _truthy(params.get("free")):
        version_terms["license_version__price_micros"] = 0
    if version_terms:
        qs = qs.filter(Exists(DatasetVersion.objects.filter(dataset=OuterRef("pk"), **version_terms)))
    return qs.order_by("domain", "name", "id")


@login_required
def catalog(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The catalog: search, filters, pagination, empty state; the table alone for htmx."""
    organization = request_organization(request, slug=org)
    form = CatalogFilterForm(request.GET or None)
    qs = selectors.datasets_visible_to(organization).prefetch_related("versions__license_version__license")
    qs = filter_catalog(qs, request.GET)
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [(d, max(d.versions.all(), key=lambda v: v.number, default=None)) for d in page.object_list]
    context = {"org": organization, "form": form, "page": page, "rows": rows, "query": request.GET.urlencode()}
    template = "datasets/catalog_table.html" if is_partial(request) else "datasets/catalog.html"
    return render(request, template, context)


def _dataset_or_404(organization: Any, pk: int) -> Dataset:
    try:
        return selectors.dataset_for_org(organization, pk)
    except DatasetNotFound:
        raise Http404("not found") from None


@login_required
def dataset_detail(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """Statistics, a (de-identified) sample, the license and its terms, attribution, versions and whether
    the organization holds a current agreement."""
    organization = request_organization(request, slug=org)
    dataset = _dataset_or_404(organization, pk)
    versions = list(dataset.versions.select_related("license_version__license"))
    version = versions[0] if versions else None
    context: dict[str, Any] = {"org": organization, "dataset": dataset, "versions": versions, "version": version}
    if version is not None:
        required = selectors.required_license_version(version)
        needs = selectors.version_needs_agreement(organization, version)
        context.update(
            required=required,
            needs_agreement=needs,
            agreement=selectors.agreement_current(organization, required, dataset=dataset) if needs else None,
            revoked=selectors.revocation_for(organization, dataset) if needs else None,
            mount_form=MountForm(initial={"version": version.pk}),
        )
    template = "datasets/dataset_status.html" if is_partial(request) else "datasets/dataset_detail.html"
    return render(request, template, context)


@login_required
def agreement_modal(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """GET: the modal with the exact license text whose SHA-256 the agreement will record.
    POST: accept on behalf of the organization (``services.agreement_accept``)."""
    organization = request_organization(request, slug=org)
    dataset = _dataset_or_404(organization, pk)
    version = dataset.latest_version
    if version is None:
        raise Http404("no version")
    required = selectors.required_license_version(version)
    error = None
    if request.method == "POST":
        form = AgreementForm(request.POST)
        if form.is_valid():
            lv = LicenseVersion.objects.filter(
                pk=form.cleaned_data["license_version"], license=required.license
            ).first()
            if lv is None:
                raise Http404("no such license version")
            try:
                _agreement, created = services.agreement_accept_once(
                    organization=organization,
                    user=request.user,
                    license_version=lv,
                    shown_text_sha256=form.cleaned_data["text_sha256"],
                    ip=request.META.get("REMOTE_ADDR"),
                    user_agent=request.META.get("HTTP_USER_AGENT", ""),
                    dataset=dataset,
                )
            except DatasetError as exc:
                error = str(exc)
            else:
                covered = ", ".join(d.name for d in selectors.datasets_covered_by(organization, lv))
                if created:
                    messages.success(
                        request, _("Agreement recorded. You can now mount %(datasets)s.") % {"datasets": covered}
                    )
                else:
                    messages.info(
                        request,
                        _("%(license)s is already accepted for your organization; nothing was recorded again.")
                        % {"license": str(lv)},
                    )
                if request.htmx:  # type: ignore[attr-defined]
                    response = HttpResponse(status=204)
                    response["HX-Redirect"] = reverse(
                        "dataset_detail", kwargs={"org": organization.slug, "pk": dataset.pk}
                    )
                    return response
                return redirect("dataset_detail", org=organization.slug, pk=dataset.pk)
        else:
            error = _("The form was not valid; reload the page and try again.")
    form = AgreementForm(initial={"license_version": required.pk, "text_sha256": required.text_sha256})
    context = {
        "org": organization,
        "dataset": dataset,
        "license_version": required,
        "covered": selectors.datasets_covered_by(organization, required),
        "form": form,
        "error": error,
    }
    template = "datasets/agreement_modal.html" if is_partial(request) else "datasets/agreement_page.html"
    return render(request, template, context, status=400 if error else 200)


@login_required
@require_POST
def dataset_mount(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """Attach a version read-only to a consumer (``services.mount_attach``); refused without an agreement."""
    organization = request_organization(request, slug=org)
    dataset = _dataset_or_404(organization, pk)
    form = MountForm(request.POST)
    status = 200
    if not form.is_valid():
        messages.error(request, _("Choose what to attach the dataset to."))
        status = 400
    else:
        try:
            mount = services.mount_attach(
                organization=organization,
                user=request.user,
                version_id=form.cleaned_data["version"],
                consumer=form.cleaned_data["consumer"],
            )
        except DatasetNotFound:
            raise Http404("not found") from None
        except DatasetError as exc:
            messages.error(request, str(exc))
            status = 403
        else:
            messages.success(
                request,
                _("%(version)s attached read-only to %(consumer)s.")
                % {"version": str(mount.version), "consumer": mount.consumer},
            )
    if status != 200:
        response = dataset_detail(request, org, dataset.pk)
        response.status_code = status
        return response
    return redirect("dataset_detail", org=organization.slug, pk=dataset.pk)


@csrf_exempt
def upload_list(request: HttpRequest, org: str) -> HttpResponse:
    """The organization's uploads and the upload form. The size-limit handler is installed before the body
    is read (hence CSRF is checked inside, after it)."""
    request.upload_handlers.insert(0, SizeLimitUploadHandler(request))
    return _upload_list(cast(AuthedHttpRequest, request), org)  # its login_required refuses anonymous users


@login_required
@csrf_protect
def _upload_list(request: AuthedHttpRequest, org: str) -> HttpResponse:
    from django.conf import settings

    organization = request_organization(request, slug=org)
    limiter = next(h for h in request.upload_handlers if isinstance(h, SizeLimitUploadHandler))
    reusable = selectors.versions_mountable_by(organization)
    form = UploadForm(tokenizer_versions=reusable)
    status = 200
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES, tokenizer_versions=reusable)
        if limiter.exceeded:
            form.add_error(
                None,
                _("The file is larger than the upload limit of %(limit)s bytes.")
                % {"limit": f"{settings.DATASET_UPLOAD_MAX_BYTES:,}"},
            )
            status = 413
        elif form.is_valid():
            data = form.cleaned_data
            try:
                upload = services.upload_create(
                    organization=organization,
                    user=request.user,
                    file=data["file"],
                    name=data["name"],
                    fmt=data["format"],
                    text_column=data["text_column"],
                    keep_original=data["keep_original"],
                    domain=data["domain"],
                    original_filename=data["file"].name,
                    tokenizer_from=data.get("tokenizer_from"),
                )
            except DatasetError as exc:
                form.add_error(None, str(exc))
                status = 400
            else:
                return redirect("upload_detail", org=organization.slug, pk=upload.pk)
        else:
            status = 400
    page = Paginator(selectors.uploads_for_org(organization), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"org": organization, "form": form, "page": page, "limit_bytes": settings.DATASET_UPLOAD_MAX_BYTES}
    return render(request, "datasets/uploads.html", context, status=status)


@login_required
def upload_detail(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """One upload with its progress; the progress partial is polled by htmx while it runs."""
    organization = request_organization(request, slug=org)
    try:
        upload = selectors.upload_for_org(organization, pk)
    except DatasetNotFound:
        raise Http404("not found") from None
    if request.method == "POST":
        try:
            services.upload_retry(upload=upload, user=request.user)
        except DatasetError as exc:
            messages.error(request, str(exc))
        return redirect("upload_detail", org=organization.slug, pk=upload.pk)
    context = {"org": organization, "upload": upload}
    template = "datasets/upload_progress.html" if is_partial(request) else "datasets/upload_detail.html"
    return render(request, template, context)


@login_required
def deid_settings(request: HttpRequest, org: str) -> HttpResponse:
    """The organization's de-identification settings: placeholder style and allow-list (managers change
    them; members see them)."""
    from datasets.forms import DeidPolicyForm
    from datasets.models import DeidPolicy
    from datasets.policy import deid_policy_update

    organization = request_organization(request, slug=org)
    policy = DeidPolicy.objects.filter(organization=organization).first()
    initial = {
        "placeholder_style": policy.placeholder_style if policy else "typed",
        "allow_list": policy.allow_list if policy else "",
    }
    form = DeidPolicyForm(initial=initial)
    status = 200
    if request.method == "POST":
        form = DeidPolicyForm(request.POST)
        if form.is_valid():
            try:
                deid_policy_update(
                    organization=organization,
                    user=request.user,  # type: ignore[arg-type]
                    placeholder_style=form.cleaned_data["placeholder_style"],
                    allow_list=form.cleaned_data["allow_list"],
                )
            except DatasetError as exc:
                form.add_error(None, str(exc))
                status = 403
            else:
                messages.success(request, _("De-identification settings saved."))
                return redirect("deid_settings", org=organization.slug)
        else:
            status = 400
    return render(request, "datasets/deid_settings.html", {"org": organization, "form": form}, status=status)
