"""Contains all the data models used in inputs/outputs"""

from .agreement import Agreement
from .agreement_create_request import AgreementCreateRequest
from .api_token import ApiToken
from .app import App
from .app_state_enum import AppStateEnum
from .app_visibility_enum import AppVisibilityEnum
from .apps_invoke_create_body import AppsInvokeCreateBody
from .apps_invoke_create_response_200 import AppsInvokeCreateResponse200
from .apps_publish_create_response_200 import AppsPublishCreateResponse200
from .apps_publish_create_response_202 import AppsPublishCreateResponse202
from .attempt import Attempt
from .attempt_state_enum import AttemptStateEnum
from .blank_enum import BlankEnum
from .call import Call
from .call_status_enum import CallStatusEnum
from .category_enum import CategoryEnum
from .chat_completion_request_request import ChatCompletionRequestRequest
from .chat_completion_request_request_stream_options_type_0 import (
    ChatCompletionRequestRequestStreamOptionsType0,
)
from .checkpoint import Checkpoint
from .completion_request_request import CompletionRequestRequest
from .completion_request_request_stream_options_type_0 import (
    CompletionRequestRequestStreamOptionsType0,
)
from .dataset import Dataset
from .dataset_latest_version_type_0 import DatasetLatestVersionType0
from .dataset_version import DatasetVersion
from .dataset_visibility_enum import DatasetVisibilityEnum
from .datasets_list_domain import DatasetsListDomain
from .deid_status_enum import DeidStatusEnum
from .domain_enum import DomainEnum
from .engine_enum import EngineEnum
from .error_envelope import ErrorEnvelope
from .error_envelope_error import ErrorEnvelopeError
from .format_enum import FormatEnum
from .grant import Grant
from .grant_kind_enum import GrantKindEnum
from .hyperparameters_request import HyperparametersRequest
from .instance import Instance
from .instance_costs import InstanceCosts
from .instance_kind_enum import InstanceKindEnum
from .instance_launch_request import InstanceLaunchRequest
from .instance_status_enum import InstanceStatusEnum
from .instance_utilization import InstanceUtilization
from .job import Job
from .job_launch_request import JobLaunchRequest
from .job_log import JobLog
from .jobs_metrics_retrieve_response_200 import JobsMetricsRetrieveResponse200
from .jupyter_access import JupyterAccess
from .jupyter_access_state_enum import JupyterAccessStateEnum
from .ledger_line import LedgerLine
from .license_version import LicenseVersion
from .me import Me
from .membership import Membership
from .mixed_precision_enum import MixedPrecisionEnum
from .mode_enum import ModeEnum
from .model_preset_enum import ModelPresetEnum
from .mount import Mount
from .mount_create_request import MountCreateRequest
from .open_ai_error import OpenAIError
from .open_ai_error_error import OpenAIErrorError
from .openai_chat_completions_create_response_200 import (
    OpenaiChatCompletionsCreateResponse200,
)
from .openai_completions_create_response_200 import OpenaiCompletionsCreateResponse200
from .openai_models_list_response_200 import OpenaiModelsListResponse200
from .openai_models_retrieve_response_200 import OpenaiModelsRetrieveResponse200
from .outcome_enum import OutcomeEnum
from .paginated_agreement_list import PaginatedAgreementList
from .paginated_api_token_list import PaginatedApiTokenList
from .paginated_app_list import PaginatedAppList
from .paginated_call_list import PaginatedCallList
from .paginated_dataset_list import PaginatedDatasetList
from .paginated_dataset_version_list import PaginatedDatasetVersionList
from .paginated_instance_list import PaginatedInstanceList
from .paginated_job_list import PaginatedJobList
from .paginated_ledger_line_list import PaginatedLedgerLineList
from .paginated_ssh_key_list import PaginatedSshKeyList
from .paginated_upload_list import PaginatedUploadList
from .paginated_usage_record_list import PaginatedUsageRecordList
from .paginated_volume_list import PaginatedVolumeList
from .paginated_webhook_delivery_list import PaginatedWebhookDeliveryList
from .paginated_webhook_endpoint_list import PaginatedWebhookEndpointList
from .pin_request import PinRequest
from .publish_request import PublishRequest
from .revenue import Revenue
from .role_enum import RoleEnum
from .rollback_request import RollbackRequest
from .scope_enum import ScopeEnum
from .share import Share
from .share_create_request import ShareCreateRequest
from .source_enum import SourceEnum
from .ssh_access import SshAccess
from .ssh_key import SshKey
from .ssh_key_create import SshKeyCreate
from .ssh_key_create_request import SshKeyCreateRequest
from .statement import Statement
from .statement_kind import StatementKind
from .statement_usage import StatementUsage
from .statement_volume import StatementVolume
from .statement_write_off import StatementWriteOff
from .tier_enum import TierEnum
from .top_up import TopUp
from .top_up_create_request import TopUpCreateRequest
from .top_up_status_enum import TopUpStatusEnum
from .upload import Upload
from .upload_create_request import UploadCreateRequest
from .upload_status_enum import UploadStatusEnum
from .usage_record import UsageRecord
from .utilization_card import UtilizationCard
from .utilization_sample import UtilizationSample
from .version import Version
from .version_create_kind_enum import VersionCreateKindEnum
from .version_create_request import VersionCreateRequest
from .version_kind_enum import VersionKindEnum
from .version_status_enum import VersionStatusEnum
from .volume import Volume
from .volume_create_request import VolumeCreateRequest
from .wallet import Wallet
from .webhook_attempt import WebhookAttempt
from .webhook_delivery import WebhookDelivery
from .webhook_delivery_status_enum import WebhookDeliveryStatusEnum
from .webhook_endpoint import WebhookEndpoint
from .webhook_endpoint_create_request import WebhookEndpointCreateRequest
from .webhook_endpoint_with_secret import WebhookEndpointWithSecret
from .webhook_event_type_enum import WebhookEventTypeEnum
from .webhooks_deliveries_list_status import WebhooksDeliveriesListStatus

__all__ = (
    "Agreement",
    "AgreementCreateRequest",
    "ApiToken",
    "App",
    "AppStateEnum",
    "AppVisibilityEnum",
    "AppsInvokeCreateBody",
    "AppsInvokeCreateResponse200",
    "AppsPublishCreateResponse200",
    "AppsPublishCreateResponse202",
    "Attempt",
    "AttemptStateEnum",
    "BlankEnum",
    "Call",
    "CallStatusEnum",
    "CategoryEnum",
    "ChatCompletionRequestRequest",
    "ChatCompletionRequestRequestStreamOptionsType0",
    "Checkpoint",
    "CompletionRequestRequest",
    "CompletionRequestRequestStreamOptionsType0",
    "Dataset",
    "DatasetLatestVersionType0",
    "DatasetVersion",
    "DatasetVisibilityEnum",
    "DatasetsListDomain",
    "DeidStatusEnum",
    "DomainEnum",
    "EngineEnum",
    "ErrorEnvelope",
    "ErrorEnvelopeError",
    "FormatEnum",
    "Grant",
    "GrantKindEnum",
    "HyperparametersRequest",
    "Instance",
    "InstanceCosts",
    "InstanceKindEnum",
    "InstanceLaunchRequest",
    "InstanceStatusEnum",
    "InstanceUtilization",
    "Job",
    "JobLaunchRequest",
    "JobLog",
    "JobsMetricsRetrieveResponse200",
    "JupyterAccess",
    "JupyterAccessStateEnum",
    "LedgerLine",
    "LicenseVersion",
    "Me",
    "Membership",
    "MixedPrecisionEnum",
    "ModeEnum",
    "ModelPresetEnum",
    "Mount",
    "MountCreateRequest",
    "OpenAIError",
    "OpenAIErrorError",
    "OpenaiChatCompletionsCreateResponse200",
    "OpenaiCompletionsCreateResponse200",
    "OpenaiModelsListResponse200",
    "OpenaiModelsRetrieveResponse200",
    "OutcomeEnum",
    "PaginatedAgreementList",
    "PaginatedApiTokenList",
    "PaginatedAppList",
    "PaginatedCallList",
    "PaginatedDatasetList",
    "PaginatedDatasetVersionList",
    "PaginatedInstanceList",
    "PaginatedJobList",
    "PaginatedLedgerLineList",
    "PaginatedSshKeyList",
    "PaginatedUploadList",
    "PaginatedUsageRecordList",
    "PaginatedVolumeList",
    "PaginatedWebhookDeliveryList",
    "PaginatedWebhookEndpointList",
    "PinRequest",
    "PublishRequest",
    "Revenue",
    "RoleEnum",
    "RollbackRequest",
    "ScopeEnum",
    "Share",
    "ShareCreateRequest",
    "SourceEnum",
    "SshAccess",
    "SshKey",
    "SshKeyCreate",
    "SshKeyCreateRequest",
    "Statement",
    "StatementKind",
    "StatementUsage",
    "StatementVolume",
    "StatementWriteOff",
    "TierEnum",
    "TopUp",
    "TopUpCreateRequest",
    "TopUpStatusEnum",
    "Upload",
    "UploadCreateRequest",
    "UploadStatusEnum",
    "UsageRecord",
    "UtilizationCard",
    "UtilizationSample",
    "Version",
    "VersionCreateKindEnum",
    "VersionCreateRequest",
    "VersionKindEnum",
    "VersionStatusEnum",
    "Volume",
    "VolumeCreateRequest",
    "Wallet",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookDeliveryStatusEnum",
    "WebhookEndpoint",
    "WebhookEndpointCreateRequest",
    "WebhookEndpointWithSecret",
    "WebhookEventTypeEnum",
    "WebhooksDeliveriesListStatus",
)
