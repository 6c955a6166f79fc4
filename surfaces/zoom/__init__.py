"""Zoom: a meeting's transcript becomes a summary in a bound channel and decisions in its memory.

`webhooks` (the endpoint and the inbox), `signature` (Zoom's `x-zm-signature` and the URL
validation challenge), `meeting` (the payload, the WebVTT transcript and the request, pure),
`transcripts` (the download), `dispatch` (the inbox handler that starts the task).
"""
