"""The provider layer's former path: it lives in `activities.providers`, below the model
activity, memory's embeddings and the approval activities alike. Import it from there."""

from activities.providers import API_BASE_ENV as API_BASE_ENV
