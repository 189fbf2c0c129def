"""Rule authority: whether a fire acts, and its holds, stops, actions and the acting lease."""
