"""Every GraphQL document OpenLoop sends to Linear, in one place (the schema is Linear's
public SDL; the fake in tests parses these same documents).

Creates carry an `id` we derive from an idempotency key (Linear accepts a client-chosen UUID
on its create inputs), so a retried create finds the object it made instead of making another.
"""

from __future__ import annotations

VIEWER = "query Viewer { viewer { id name email } }"

ISSUE = """
query Issue($id: String!) {
  issue(id: $id) {
    id identifier title description url priority
    state { id name type }
    team { id key name }
    assignee { id name }
    comments(last: 10) { nodes { body createdAt user { name } } }
  }
}
"""

ISSUE_STATE = "query IssueState($id: String!) { issue(id: $id) { id state { id type } team { id } } }"

ISSUE_TEAM = "query IssueTeam($id: String!) { issue(id: $id) { id identifier team { id key } } }"

SEARCH_ISSUES = """
query SearchIssues($term: String!, $teamId: String, $first: Int) {
  searchIssues(term: $term, teamId: $teamId, first: $first) {
    nodes { identifier title url state { name } team { key } updatedAt }
  }
}
"""

TEAM_BY_KEY = (
    "query TeamByKey($key: String!) { teams(filter: { key: { eq: $key } }) { nodes { id key name } } }"
)

WORKFLOW_STATES = """
query WorkflowStates($teamId: ID!) {
  workflowStates(filter: { team: { id: { eq: $teamId } } }) { nodes { id name type position } }
}
"""

USERS_BY_EMAIL = (
    "query UsersByEmail($email: String!) { users(filter: { email: { eq: $email } }) { nodes { id email } } }"
)

USER = "query User($id: String!) { user(id: $id) { id email } }"

COMMENT = "query Comment($id: String!) { comment(id: $id) { id url } }"

COMMENT_CREATE = """
mutation CommentCreate($input: CommentCreateInput!) {
  commentCreate(input: $input) { success comment { id url } }
}
"""

ISSUE_CREATE = """
mutation IssueCreate($input: IssueCreateInput!) {
  issueCreate(input: $input) { success issue { id identifier title url } }
}
"""

ISSUE_UPDATE = """
mutation IssueUpdate($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success issue { id identifier state { name } } }
}
"""

AGENT_ACTIVITY = "query AgentActivity($id: String!) { agentActivity(id: $id) { id } }"

AGENT_ACTIVITY_CREATE = """
mutation AgentActivityCreate($input: AgentActivityCreateInput!) {
  agentActivityCreate(input: $input) { success agentActivity { id } }
}
"""

AGENT_SESSION_UPDATE = """
mutation AgentSessionUpdate($id: String!, $input: AgentSessionUpdateInput!) {
  agentSessionUpdate(id: $id, input: $input) { success }
}
"""
