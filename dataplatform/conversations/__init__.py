"""Chat conversations as the apps read and store them (OpenAI chat shaped, DESIGN.md section 3a):
`validation` checks a `messages` list as an importer receives it."""
