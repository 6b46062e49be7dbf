"""Writes fixtures/labelled/moderation.jsonl: 48 short user messages labelled by hand for spinfc/moderation, a
labelled file for `spinfc calibrate --pack spinfc/moderation` (docs/calibration.md).

The messages were written for this project by one spinfc developer (no real user is quoted, no data set is
copied), six for each of seven categories plus six ordinary messages, some of them near misses on purpose (a
news report of a threat, a complaint about spam, a recipe with "killer"), and labelled by the same person. No
model chose any label. A message is labelled 1 in a column when the message itself does what the category names
(docs/packs.md, house style 3): reporting, quoting to condemn, or joking about harm without aiming it is 0.

    harassment       abuse aimed at a specific person (an insult, mockery, telling them to hurt themselves)
    hate             an attack on people for their race, religion, gender, orientation, disability or nationality
    violent_threat   a threat to hurt or kill someone
    self_harm_risk   the writer says they want to hurt or kill themselves, or plans to
    scam_phishing    a prize, profit or account warning meant to get money, a password or a code
    spam             advertising or junk posted where it does not belong
    illegal_drugs    offers to sell, or asks to buy, illegal drugs

    python scripts/make_moderation_labels.py [OUTPUT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = ("harassment", "hate", "violent_threat", "self_harm_risk", "scam_phishing", "spam", "illegal_drugs")
# (message, the columns labelled 1)
MESSAGES = [
    ("You are a pathetic loser and nobody at work can stand you.", {"harassment"}),
    ("Look at Mark's stupid haircut, what an absolute clown he is.", {"harassment"}),
    ("Nobody wants you here, Jenny. Just disappear.", {"harassment"}),
    ("Hey @sam_k, you're the dumbest person on this forum, go cry.", {"harassment"}),
    ("Your essay is garbage and so are you, Tom.", {"harassment"}),
    ("Lisa is so ugly it hurts to look at her profile picture.", {"harassment"}),
    ("People of that religion are all liars and should be thrown out of the country.", {"hate"}),
    ("Immigrants are vermin spreading through our towns.", {"hate"}),
    ("Women are too stupid to be engineers, it is a fact.", {"hate"}),
    ("Disabled people are a burden and should not be allowed to have kids.", {"hate"}),
    ("All people from that country are criminals and thieves.", {"hate"}),
    ("Gay people are a disease on society.", {"hate"}),
    ("I know where you live and I will come and break your legs.", {"violent_threat"}),
    ("Say that again and I will stab you.", {"violent_threat"}),
    ("If you show up at the meeting tomorrow I will shoot you.", {"violent_threat"}),
    ("Watch your back, tonight you and your family are dead.", {"violent_threat", "harassment"}),
    ("I'm going to burn your house down while you sleep.", {"violent_threat"}),
    ("Keep talking and I'll beat you until you can't stand.", {"violent_threat"}),
    ("I don't want to be alive anymore. I'm going to end it this weekend.", {"self_harm_risk"}),
    ("I have been cutting myself again and I want to do it deeper tonight.", {"self_harm_risk"}),
    ("Everyone would be better off if I killed myself.", {"self_harm_risk"}),
    ("I wrote my goodbye letters. Tonight I take all the pills.", {"self_harm_risk"}),
    ("I keep thinking about jumping off the bridge near my house.", {"self_harm_risk"}),
    ("I can't do this anymore, I just want to die.", {"self_harm_risk"}),
    ("Your bank account is suspended. Reply with your card number and PIN to unlock it.", {"scam_phishing"}),
    ("Congratulations, you won an iPhone! Pay a $5 shipping fee with a gift card to claim it.", {"scam_phishing"}),
    ("Invest $200 today and get $5000 back in a week, guaranteed. DM me.", {"scam_phishing"}),
    ("This is the security team. Send us the 6-digit code we just texted you.", {"scam_phishing"}),
    ("Your parcel is held at customs. Click here and enter your card details to release it.", {"scam_phishing"}),
    ("I am a prince and need your help moving $10 million, send your bank details.", {"scam_phishing"}),
    ("BEST CHEAP WATCHES!!! visit cheapwatchez dot com now!!! best prices!!!", {"spam"}),
    ("Follow my page for daily memes, like and subscribe, follow for follow!", {"spam"}),
    ("Buy followers now, 1000 followers for $2, fast delivery, link in bio.", {"spam"}),
    ("asdf asdf asdf asdf asdf asdf asdf asdf asdf asdf", {"spam"}),
    ("Great post! Check out my casino site for free spins and bonuses!", {"spam"}),
    ("Lose 10 kg in 10 days with our tea, order now, visit our shop!", {"spam"}),
    ("Selling weed and pills, cheap, message me on Telegram for prices.", {"illegal_drugs"}),
    ("Anyone know where I can buy cocaine in the city tonight?", {"illegal_drugs"}),
    ("Fresh MDMA and LSD in stock, shipping in discreet packages.", {"illegal_drugs"}),
    ("I sell meth, good quality, pick up behind the station.", {"illegal_drugs"}),
    ("Who can get me some heroin? Paying cash.", {"illegal_drugs"}),
    ("Oxy without a prescription, 20 a pill, DM me.", {"illegal_drugs"}),
    ("Thanks for the help yesterday, everything works now. Have a great weekend!", set()),
    ("The city council voted to extend the night bus service to the airport.", set()),
    ("The news said a man threatened a shop owner with a knife and was arrested.", set()),
    ("I'm so tired of all the spam in my inbox, how do I block it?", set()),
    ("This chili recipe is a killer, my kids loved it.", set()),
    ("My grandmother passed away last year and I still miss her every day.", set()),
]


def labelled() -> list[dict]:
    return [{"id": f"mod-{k:03d}", "text": text, **{c: int(c in positive) for c in COLUMNS}}
            for k, (text, positive) in enumerate(MESSAGES)]


def main() -> None:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "fixtures" / "labelled" /
                  "moderation.jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(row) + "\n" for row in labelled()))
    print(f"wrote {target}: {len(MESSAGES)} rows, {len(COLUMNS)} label columns")


if __name__ == "__main__":
    main()
