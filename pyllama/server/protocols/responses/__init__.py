"""OpenAI Responses: /v1/responses (``routes``), input items and tools translated into the
pipeline's chat shapes (``convert``), and stored responses for ``previous_response_id``
(``store``)."""
